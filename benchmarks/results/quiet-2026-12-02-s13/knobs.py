"""`kleene` with session 13's keyed-parts knobs from the environment (``BPW``:
``parallel.BUCKETS_PER_WORKER``, ``OB``: ``parallel.OPEN_BUCKETS``), for ``arms.py``'s
``TL2=`` arms (``arms_ob.log`` ran it as /tmp/prof/knobs.py):

    python arms.py 14 w1=src:1 ob2=src:2:TL2=<this file>,OB=2 ob8=src:2:TL2=<this file>,OB=8
"""
import os
import sys

import kleene.runtime.parallel as par

if os.environ.get("BPW"):
    par.BUCKETS_PER_WORKER = int(os.environ["BPW"])
if os.environ.get("OB"):
    par.OPEN_BUCKETS = int(os.environ["OB"])
from kleene.cli.main import main  # noqa: E402

sys.argv = ["kleene", *sys.argv[1:]]
main()
