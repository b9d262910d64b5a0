"""torch_diode: fleet-learned GEMM kernel selection for torch.compile.

The wire format (`torch_diode.wire`) and features (`torch_diode.features`)
import without torch. The Inductor hook is installed by `torch_diode.install()`.
"""

__version__ = "0.1.0"
