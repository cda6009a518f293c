"""SGLang stand-in package of the sparkfleet twin (see /opt/sparksim)."""
