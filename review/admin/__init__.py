"""Admin: user accounts and roles, the change log (who changed what, when), and backup and
restore of the whole database.

May use: policy, core."""
