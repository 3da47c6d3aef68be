"""A tiny Hugging Face Hub on 127.0.0.1 for tests (stdlib only), serving what huggingface_hub's
`snapshot_download` and `hf_hub_download` ask for. Point huggingface_hub at it with HF_ENDPOINT.

    hub = FakeHub()
    commit = hub.add_commit("datasets", "org/mrcr", {"2needle/2needle_0.parquet": data}, ref="main")
    with hub:   # hub.url -> http://127.0.0.1:PORT
        ...

Endpoints (as the Hub's): `GET /api/{models,datasets}/ORG/NAME[/revision/REV]` (repo info with the
resolved `sha`), `GET /api/{models,datasets}/ORG/NAME/tree/REV[/PATH]` (file listing), and
`HEAD`/`GET /[datasets/]ORG/NAME/resolve/REV/PATH` (file bytes with `X-Repo-Commit` and `ETag`).
Errors carry the `X-Error-Code` huggingface_hub maps to its exceptions. `requests` counts calls.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit


class FakeHub:
    def __init__(self) -> None:
        # (kind, repo id) -> {"commits": {sha: {path: bytes}}, "refs": {name: sha}}
        self.repos: dict[tuple[str, str], dict[str, dict]] = {}
        self.requests: Counter[str] = Counter()
        handler = type("Handler", (_Handler,), {"hub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    def add_commit(
        self, kind: str, repo_id: str, files: dict[str, bytes], ref: str | None = "main", sha: str | None = None
    ) -> str:
        """Add a commit holding exactly `files`; `ref` (a branch) then points at it. Returns its sha
        (`sha`: this one, e.g. a real repository's pinned commit)."""
        repo = self.repos.setdefault((kind, repo_id), {"commits": {}, "refs": {}})
        sha = sha or hashlib.sha1(json.dumps([repo_id, len(repo["commits"]), sorted(files)]).encode()).hexdigest()
        repo["commits"][sha] = dict(files)
        if ref is not None:
            repo["refs"][ref] = sha
        return sha

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-hub", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def resolve(self, kind: str, repo_id: str, revision: str) -> tuple[str | None, str | None]:
        """(commit sha, error code)."""
        repo = self.repos.get((kind, repo_id))
        if repo is None:
            return None, "RepoNotFound"
        sha = repo["refs"].get(revision, revision if revision in repo["commits"] else None)
        return (sha, None) if sha is not None else (None, "RevisionNotFound")


def _split_repo(parts: list[str]) -> tuple[str, list[str]]:
    return f"{parts[0]}/{parts[1]}", parts[2:]


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _error(self, code: str, head: bool = False) -> None:
        self._send(404, json.dumps({"error": code}).encode(), {"X-Error-Code": code, "Content-Type": "application/json"}, head)

    def _json(self, obj: Any) -> None:
        self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json"})

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self._serve(head=True)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        hub = self.hub
        path = urlsplit(self.path).path
        parts = [unquote(p) for p in path.strip("/").split("/")]
        hub.requests[f"{self.command} {path}"] += 1
        if parts[0] == "api" and len(parts) >= 4 and parts[1] in ("models", "datasets"):
            kind = parts[1]
            repo_id, rest = _split_repo(parts[2:])
            revision = rest[1] if len(rest) >= 2 else "main"
            sha, error = hub.resolve(kind, repo_id, revision)
            if error:
                return self._error(error)
            files = hub.repos[(kind, repo_id)]["commits"][sha]
            if not rest or rest[0] == "revision":
                return self._json({"id": repo_id, "sha": sha, "private": False, "siblings": [{"rfilename": p} for p in sorted(files)]})
            if rest[0] == "tree":
                under = "/".join(rest[2:])
                listing = [
                    {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": p}
                    for p, data in sorted(files.items())
                    if not under or p.startswith(under + "/")
                ]
                return self._json(listing)
            return self._error("EntryNotFound")
        kind = "datasets" if parts[0] == "datasets" else "models"
        if kind == "datasets":
            parts = parts[1:]
        if len(parts) < 5 or parts[2] != "resolve":
            return self._error("RepoNotFound", head)
        repo_id = f"{parts[0]}/{parts[1]}"
        sha, error = hub.resolve(kind, repo_id, parts[3])
        if error:
            return self._error(error, head)
        data = hub.repos[(kind, repo_id)]["commits"][sha].get("/".join(parts[4:]))
        if data is None:
            return self._error("EntryNotFound", head)
        etag = hashlib.sha256(data).hexdigest()
        headers = {"X-Repo-Commit": sha, "ETag": f'"{etag}"', "Content-Type": "application/octet-stream"}
        self._send(200, data, headers, head)
