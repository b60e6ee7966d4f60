"""Array workloads written once against ``xp`` (numpy or cupy).

Each op is named with :func:`pytest_opprof.op`, the way a library would
instrument itself: free when no profiler is recording, timed when one is.
Op names follow PaddlePaddle's.
"""
