"""docs/testing.md's table "Every attack and fault, and its test": every test it names is
defined in the file it names (a GoogleTest TEST/TEST_F/TEST_P, a pytest function, or a CTest
add_test), and every fault 1-9 of issue 54 has a row."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing.md"


def _rows():
    text = DOC.read_text()
    start = text.index("## Every attack and fault, and its test")
    end = text.index("\n## ", start + 1)
    rows = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("#", "---"):
            continue
        rows.append(cells)
    return rows


def _defined(path: Path, name: str) -> bool:
    src = path.read_text()
    if path.name == "CMakeLists.txt":
        return re.search(r"add_test\(NAME " + re.escape(name) + r"\b", src) is not None
    if path.suffix == ".py":
        return re.search(r"^def " + re.escape(name) + r"\(", src, re.M) is not None
    suite, test = name.split(".")
    # TEST(Suite, Name), TEST_F(Suite, Name), or TEST_P(Suite, Name) of a parameterized suite.
    return re.search(r"^TEST(_F|_P)?\(" + re.escape(suite) + r",\s*" + re.escape(test) + r"\)", src, re.M) is not None


def test_every_named_test_exists_in_its_file():
    rows = _rows()
    assert len(rows) >= 30
    missing = []
    for src, what, file_cell, tests_cell in rows:
        tests = re.findall(r"`([^`]+)`", tests_cell)
        if not tests:
            assert file_cell == "(none)" and "no test yet" in tests_cell, (src, what)
            continue
        path = ROOT / file_cell.strip("`")
        assert path.is_file(), (src, file_cell)
        missing += [(src, str(path.relative_to(ROOT)), t) for t in tests if not _defined(path, t)]
    assert not missing, missing


def test_every_fault_of_issue_54_has_a_row():
    numbers = {r[0] for r in _rows()}
    for n in range(1, 10):
        assert f"54.{n}" in numbers, n
    assert any(n.startswith("16.") for n in numbers)
