"""Launch the inference server (the sparkfleet twin's SGLang stand-in).

The real tokenizer_manager.py and watchdog.py of the release live beside this
file under srt/; everything else is the stand-in in /opt/sparksim/sparksim.
"""

import sys

if __name__ == "__main__":
    from sparksim.server import main

    sys.exit(main(sys.argv[1:]))
