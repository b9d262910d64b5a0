"""Pieces shared by the native client tests (test_native_client.py, test_sources_family.py):
the libdiode_client.so fixture and a stdlib HTTP hub on 127.0.0.1."""
import http.server
import threading

import pytest

from torch_diode import native


@pytest.fixture(scope="module")
def lib():
    """libdiode_client.so, loaded once per module; the test skips when it is not built."""
    try:
        return native.load_library()
    except native.NativeClientUnavailable as e:
        pytest.skip(f"libdiode_client.so is not built: {e}")


class HttpHub:
    """A ThreadingHTTPServer on 127.0.0.1 (ephemeral port) answering each GET with
    self.body(request path): bytes with a 200, None with a 404. Subclasses define body()
    and set their own attributes before calling HttpHub.__init__ (it starts serving)."""

    def __init__(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = hub.body(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def body(self, path: str) -> bytes | None:
        raise NotImplementedError

    def close(self):
        self.server.shutdown()
        self.server.server_close()
