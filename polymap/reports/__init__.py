"""Every human and JSON report, and the plots."""
