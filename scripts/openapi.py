#!/usr/bin/python3
"""data/openapi.yaml from docs/api.md: the REST API as an OpenAPI 3.0 document, served by the
daemon at GET /api/v1/openapi.json (embedded in the binary like every data/*.yaml).

docs/api.md is the one place the API is described; each row of its route tables,
"| `METHOD /path[?query=…]` … | what |", becomes an operation: its path parameters ({run}),
its query parameters (from the [?name=…] and [&name=…] parts), and the row's text as its
description. /ui/… pages are the web UI's, not the API's, and are left out. The route table
(src/lathe/api/server.cc) is checked against the result by a unit test (api/openapi_test.cc).

  scripts/openapi.py            rewrites data/openapi.yaml
  scripts/openapi.py --check    exits 1 when data/openapi.yaml is not what docs/api.md gives
"""
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "api.md"
OUT = ROOT / "data" / "openapi.yaml"
ROW = re.compile(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`([^|]*)\| (.*) \|\s*$")


def plain(text):
    """A table cell as plain text: markdown emphasis and links dropped, pipes unescaped."""
    text = text.replace("\\|", "|")
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    return text.strip()


def operations(doc):
    ops = {}
    for line in doc.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        method, target, body, what = m.groups()
        path = re.split(r"[\[?]", target, maxsplit=1)[0]
        if path.startswith("/ui"):
            continue
        query = sorted(set(re.findall(r"[?&]([a-z_]+)=", target)))
        op = ops.setdefault((method, path), {"query": set(), "text": []})
        op["query"].update(query)
        op["text"].append(plain((f"`{target}`{body}" if body.strip() else f"`{target}`") +
                                ": " + what))
    return ops


def document(ops):
    paths = {}
    for (method, path), op in sorted(ops.items()):
        params = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                  for p in re.findall(r"\{(\w+)\}", path)]
        params += [{"name": q, "in": "query", "required": False, "schema": {"type": "string"}}
                   for q in sorted(op["query"])]
        entry = {
            "summary": f"{method} {path}",
            "description": "\n\n".join(op["text"]),
            "responses": {"default": {"description": "as the description says; an error is "
                                      "{error, code, msg_id, args, en, zh}"}},
        }
        if params:
            entry["parameters"] = params
        paths.setdefault(path, {})[method.lower()] = entry
    return {
        "openapi": "3.0.3",
        "info": {"title": "Lathe API", "version": "1",
                 "description": "Generated from docs/api.md by scripts/openapi.py; "
                                "docs/api.md has the whole text (limits, access, errors)."},
        "servers": [{"url": "/"}],
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    }


def render():
    doc = document(operations(DOCS.read_text()))
    head = "# Generated from docs/api.md by scripts/openapi.py: edit docs/api.md, then run it.\n"
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)


def main():
    text = render()
    if "--check" in sys.argv[1:]:
        if OUT.read_text() != text:
            print(f"{OUT} is not what {DOCS} gives: run scripts/openapi.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
