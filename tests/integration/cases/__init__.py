"""The integration cases, one module per family (launch, attach, snapshot,
ending, timeouts, symbols, frames, locks, follow, live, streams, cli).
Each registers its cases with ptw_test.case; run.py imports every module
here (by glob) and runs the case named on its command line."""
