"""docs/openapi.yaml is a valid OpenAPI 3.0 document and describes the routes the hub serves.

Structural checks that need only PyYAML (every $ref resolves, path parameters are
declared, every operation has described responses, security schemes exist), the
full openapi-spec-validator when it is installed, and the route list against
svr_.Get/Post in hub/src/http_server.cpp and hub/src/page.cpp, so a route added
to the hub without its documentation fails here.
"""
import pathlib
import re

import pytest

yaml = pytest.importorskip("yaml")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "openapi.yaml"
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture(scope="module")
def spec():
    return yaml.safe_load(SPEC.read_text())


def _resolve(spec, ref):
    assert ref.startswith("#/"), f"only local $refs are used: {ref}"
    node = spec
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"$ref {ref} does not resolve"
        node = node[part]
    return node


def _walk(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, path + (str(k),))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, path + (str(i),))


def test_header(spec):
    assert re.fullmatch(r"3\.0\.\d+", str(spec["openapi"]))
    assert spec["info"]["title"] and str(spec["info"]["version"])
    assert isinstance(spec["paths"], dict) and spec["paths"]


def test_every_ref_resolves(spec):
    refs = [(p, n["$ref"]) for p, n in _walk(spec) if "$ref" in n]
    assert refs
    for where, ref in refs:
        target = _resolve(spec, ref)
        assert isinstance(target, dict), f"{'/'.join(where)}: {ref} is not an object"


def test_operations_are_well_formed(spec):
    schemes = set(spec["components"].get("securitySchemes", {}))
    for route, item in spec["paths"].items():
        assert route.startswith("/"), route
        templated = set(re.findall(r"\{([^}]+)\}", route))
        ops = {m: op for m, op in item.items() if m in METHODS}
        assert ops, f"{route}: no operation"
        for method, op in ops.items():
            where = f"{method.upper()} {route}"
            assert op.get("summary") or op.get("description"), f"{where}: no summary"
            params = [(_resolve(spec, p["$ref"]) if "$ref" in p else p) for p in op.get("parameters", [])]
            for p in params:
                assert {"name", "in"} <= set(p), f"{where}: parameter without name/in: {p}"
                assert p["in"] in {"path", "query", "header", "cookie"}, f"{where}: {p}"
                assert "schema" in p or "content" in p, f"{where}: parameter {p['name']} has no schema"
            in_path = {p["name"] for p in params if p["in"] == "path"}
            assert in_path == templated, f"{where}: path parameters {in_path} != template {templated}"
            for p in params:
                if p["in"] == "path":
                    assert p.get("required") is True, f"{where}: path parameter {p['name']} must be required"
            responses = op.get("responses")
            assert responses, f"{where}: no responses"
            for code, resp in responses.items():
                assert re.fullmatch(r"[1-5]\d\d|default|[1-5]XX", str(code)), f"{where}: status {code!r}"
                assert isinstance(code, str), f"{where}: status {code} must be quoted (a string key)"
                resp = _resolve(spec, resp["$ref"]) if "$ref" in resp else resp
                assert resp.get("description"), f"{where} {code}: no description"
            for req in op.get("security", []):
                assert set(req) <= schemes, f"{where}: unknown security scheme in {req}"


def test_validates_with_openapi_spec_validator(spec):
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(spec)


def _hub_routes():
    """(method, OpenAPI path) for every route the hub registers."""
    routes = set()
    for src in ("hub/src/http_server.cpp", "hub/src/page.cpp"):
        text = (ROOT / src).read_text()
        for method, pattern in re.findall(r'svr_?\.(Get|Post|Put|Delete)\(\s*(R"\((?:.*?)\)"|"[^"]*")', text):
            pattern = pattern[3:-2] if pattern.startswith('R"(') else pattern[1:-1]
            routes.add((method.lower(), pattern))
    return routes


def test_spec_documents_every_hub_route(spec):
    routes = _hub_routes()
    assert ("get", "/healthz") in routes and ("get", "/v1/summary") in routes, routes
    documented = {(m, p) for p, item in spec["paths"].items() for m in item if m in METHODS}

    def matches(pattern, path):
        # The hub's regex groups ([^/]+) stand for the spec's {name} segments.
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        return re.fullmatch(pattern, concrete) is not None

    for method, pattern in sorted(routes):
        assert any(m == method and matches(pattern, p) for m, p in documented), (
            f"{method.upper()} {pattern} is served by the hub but not in docs/openapi.yaml"
        )
    for method, path in sorted(documented):
        assert any(m == method and matches(pattern, path) for m, pattern in routes), (
            f"{method.upper()} {path} is in docs/openapi.yaml but the hub does not serve it"
        )
