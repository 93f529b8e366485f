"""A `sluice serve` started for a benchmark (bench/agent_trace.py, bench/tool_calls.py): on a free
loopback port, with the model id "m", stopped by close()."""
import json
import re
import subprocess
import threading
import time
import urllib.request


def drain(stream):
    for _ in stream:
        pass


class Server:
    def __init__(self, sluice, model, flags, who="bench"):
        self.proc = subprocess.Popen([sluice, "serve", "--model", model, "--model-id", "m", "--port", "0"] + flags,
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        deadline = time.time() + 120
        for line in self.proc.stderr:
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
            if time.time() > deadline:
                raise SystemExit(who + ": the server did not start")
        else:
            raise SystemExit(who + ": the server exited: " + " ".join(flags))
        # Keep reading its log (one line per request): a pipe nobody reads fills after ~64 KB and
        # the server's next log line blocks it (a 500-call run hung that way after ~600 requests).
        threading.Thread(target=drain, args=(self.proc.stderr,), daemon=True).start()

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=3600) as r:
            return json.load(r)

    def close(self):
        self.proc.terminate()
        self.proc.wait()
