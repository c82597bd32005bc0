"""From due markers to the work queue: the scanner, dispatch, the hand-off of what falls due soon, and
pre-scaling ahead of a crowded minute."""
