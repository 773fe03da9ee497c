"""`tidings demo`: the three source scenarios end to end."""
