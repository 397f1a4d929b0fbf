"""Interactive control while ``run_evals`` runs: a loopback HTTP endpoint and a notebook panel.

A notebook kernel busy in ``run_evals`` handles no widget events, so (like RapidFire's panel,
which talks to its dispatcher) the panel's buttons call a small HTTP server that the experiment
runs on 127.0.0.1 in a background thread. Each request queues the operation; it is applied
between shards (the shard in flight finishes first):

    POST /stop    {"config_id": 2}
    POST /resume  {"config_id": 2}
    POST /delete  {"config_id": 2}
    POST /clone   {"config_id": 1, "changes": {"pipeline_type": "vllm",
                                               "sampling_params": {"temperature": 0.2}}}
    GET  /status  the table rows as JSON

Every request carries the token of the experiment's URL (``?token=...``); the server listens
on loopback only and stops with ``Experiment.end()``. A request must name the server itself as
its ``Host`` (127.0.0.1 or localhost: a page that rebinds its own domain to 127.0.0.1 is
refused), and a browser request must come from a page on this machine (an ``Origin`` of
127.0.0.1, localhost or ::1, where notebooks serve the panel, or a VS Code notebook's webview);
its answer allows that origin alone, never ``*``. ``Experiment.control_panel()`` returns the
notebook panel (config picker, Stop / Resume / Delete, and a JSON box for Clone, which takes
RapidFire's clone payload or assay's changes).
"""

from __future__ import annotations

import html
import json
import secrets
import threading
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from assay.errors import AssayError
from assay.results.strict_json import finite_only

ACTIONS = ("stop", "resume", "delete", "clone")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""Host names a request to the control server may give (with the server's port)."""
MAX_BODY_BYTES = 1024 * 1024
"""The largest request body read (a clone payload is a few hundred bytes)."""


def local_origin(origin: str) -> bool:
    """Whether a browser `Origin` is a page on this machine: a loopback http(s) origin (a
    notebook server) or a VS Code webview (a VS Code notebook)."""
    parsed = urlparse(origin)
    if parsed.scheme == "vscode-webview":
        return True
    try:
        host = parsed.hostname
    except ValueError:
        return False
    return parsed.scheme in ("http", "https") and host in ("127.0.0.1", "localhost", "::1")


class ControlServer:
    """The experiment's control endpoint on 127.0.0.1 (a free port), served by a thread."""

    def __init__(self, experiment: Any) -> None:
        self.experiment = experiment
        self.token = secrets.token_urlsafe(16)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="assay-control", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The port the server listens on (127.0.0.1)."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL; append ``/<action>?token=<token>``."""
        return f"http://127.0.0.1:{self.port}"

    def apply(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """Queue one operation; the answer names a clone's new id."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        config_id = body.get("config_id")
        if isinstance(config_id, bool) or not isinstance(config_id, int):
            raise ValueError(f"config_id must be an integer, got {config_id!r}")
        if action == "clone":
            changes = body.get("changes")
            if not isinstance(changes, dict):
                raise ValueError("clone needs 'changes': a JSON object (RapidFire's payload)")
            return {"ok": True, "clone_id": self.experiment.clone_modify(config_id, changes)}
        getattr(self.experiment, action)(config_id)
        return {"ok": True}

    def status(self) -> list[dict[str, Any]]:
        return [asdict(row) for row in self.experiment.status_rows()]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler(server: ControlServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _authorised(self) -> bool:
            port = server.port
            if self.headers.get("Host") not in {f"{host}:{port}" for host in LOCAL_HOSTS}:
                self._send(403, {"error": f"Host must be 127.0.0.1:{port} or localhost:{port}"})
                return False
            origin = self.headers.get("Origin")
            if origin is not None and not local_origin(origin):
                self._send(403, {"error": f"requests from {origin} are refused"})
                return False
            query = parse_qs(urlparse(self.path).query)
            if secrets.compare_digest(query.get("token", [""])[0], server.token):
                return True
            self._send(403, {"error": "missing or wrong token"})
            return False

        def do_GET(self) -> None:
            if not self._authorised():
                return
            if urlparse(self.path).path == "/status":
                self._send(200, {"configs": server.status()})
            else:
                self._send(404, {"error": f"no route {urlparse(self.path).path}"})

        def do_POST(self) -> None:
            if not self._authorised():
                return
            action = urlparse(self.path).path.strip("/")
            try:
                length = int(self.headers.get("Content-Length", 0))
                if not 0 <= length <= MAX_BODY_BYTES:
                    raise ValueError(f"Content-Length {length}: give 0 to {MAX_BODY_BYTES} bytes")
                body = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
                self._send(200, server.apply(action, body))
            except (AssayError, ValueError) as exc:
                self._send(400, {"error": str(exc)})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            # Strict JSON (a browser's JSON.parse refuses NaN): non-finite metrics as null.
            data = json.dumps(finite_only(payload), default=str, allow_nan=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            origin = self.headers.get("Origin")
            if origin is not None and local_origin(origin):
                # The panel's page may read the answer; no other page may.
                self.send_header("Access-Control-Allow-Origin", origin)
                self.send_header("Vary", "Origin")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def panel_html(server: ControlServer, config_ids: list[int]) -> str:
    """The notebook panel: pick a config, Stop / Resume / Delete, or Clone with a JSON payload."""
    base = html.escape(server.url)
    token = html.escape(server.token)
    options = "".join(f'<option value="{i}">config {i}</option>' for i in config_ids)
    example = html.escape(json.dumps({"sampling_params": {"temperature": 0.2}}))
    panel_id = f"assay-panel-{token[:8]}"
    return f"""
<div id="{panel_id}" style="font-family: sans-serif; border: 1px solid #ccc; padding: 8px">
  <b>assay: interactive control</b> (applied between shards)<br>
  <select class="cfg">{options}</select>
  <button data-action="stop">Stop</button>
  <button data-action="resume">Resume</button>
  <button data-action="delete">Delete</button>
  <button data-action="clone">Clone with changes</button><br>
  <textarea class="changes" rows="3" cols="70">{example}</textarea><br>
  <span class="answer"></span>
</div>
<script>
(function() {{
  const root = document.getElementById("{panel_id}");
  root.querySelectorAll("button").forEach(function(button) {{
    button.onclick = async function() {{
      const action = button.dataset.action;
      const body = {{config_id: parseInt(root.querySelector(".cfg").value)}};
      const answer = root.querySelector(".answer");
      try {{
        if (action === "clone") {{
          body.changes = JSON.parse(root.querySelector(".changes").value);
        }}
        const reply = await fetch("{base}/" + action + "?token={token}", {{
          method: "POST", body: JSON.stringify(body)
        }});
        answer.textContent = JSON.stringify(await reply.json());
      }} catch (error) {{
        answer.textContent = String(error);
      }}
    }};
  }});
}})();
</script>
"""
