"""Make the head's engine spin: /health stays 200, a request runs, no token comes out.

Run on the head: docker exec -i spark-1 python3 - ENGINE < wd_spin.py
Creates the stand-in's spin file in the engine container (twin/engine README), then
leaves one chat request running against the head's API in the background (detached: it
ends with the engine the watchdog restarts). Prints the node's clock (epoch seconds).
"""

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request

CLUSTER_JSON = "/etc/sparkfleet/cluster.json"
ENV_FILE = "/etc/sparkfleet/sglang.env"


def request_forever(base, key):
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": "Count from 1 to 4000."}],
        "max_tokens": 4000,
    }
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(
        base + "/v1/chat/completions", data=json.dumps(body).encode(), headers=headers
    )
    # Ends with an error when the watchdog restarts the engine under it.
    with contextlib.suppress(OSError):
        urllib.request.urlopen(req, timeout=600).read()


def main(engine):
    with open(CLUSTER_JSON) as fh:
        base = json.load(fh)["health_url"].rsplit("/health", 1)[0]
    key = ""
    with open(ENV_FILE) as fh:
        for line in fh:
            if line.startswith("SGLANG_API_KEY="):
                key = line.strip().split("=", 1)[1]
    now = time.time()
    subprocess.run(["docker", "exec", engine, "touch", "/tmp/sparksim-spin"], check=True)
    if os.fork() == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        request_forever(base, key)
        os._exit(0)
    print(json.dumps({"now": now}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
