"""The reference agent: a sans-IO recovery core and its drivers. Knows nothing of the harness."""
