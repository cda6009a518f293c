"""Start this node's rank with a variant of the launch it was given (test only).

stale-pyc: drop the bytecode masks and --check-hash-based-pycs, so the image's
unchecked-hash .pyc runs instead of the mounted patched source.
originals: mount the image's original files instead of the patched ones.
"""

import glob
import subprocess
import sys

variant = sys.argv[1]
argv = subprocess.run(
    ["/usr/local/sbin/sparkfleet-sglang", "show"], check=True, capture_output=True, text=True
).stdout.splitlines()
out, i = [], 0
while i < len(argv):
    arg = argv[i]
    if variant == "stale-pyc" and arg == "-v" and argv[i + 1].split(":")[0].endswith("empty.pyc"):
        i += 2
        continue
    if variant == "stale-pyc" and arg == "--check-hash-based-pycs":
        i += 2
        continue
    if variant == "originals" and arg.startswith("/var/lib/sparkfleet/sglang-patches/live/"):
        # The originals of the image this rank runs (the node may hold earlier images' too).
        image_id = next(a for a in argv if a.startswith("sha256:"))[7:23]
        (orig,) = glob.glob(f"/var/lib/sparkfleet/sglang-patches/orig/{image_id}-*")
        arg = arg.replace("/var/lib/sparkfleet/sglang-patches/live", orig, 1)
    out.append(arg)
    i += 1
name = out[out.index("--name") + 1]
subprocess.run(["docker", "rm", "-f", name], check=False, capture_output=True)
subprocess.run(out, check=True, stdout=subprocess.DEVNULL)
print(f"started {name} ({variant})")
