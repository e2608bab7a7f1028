"""Delay bands of the cost report (pure definitions, shared by the job and the report)."""

BANDS = [(900, "≤15 min"), (3600, "≤1 h"), (86_400, "≤1 day"), (30 * 86_400, "≤30 days")]
LONGER = "longer"
BAND_ORDER = [name for _, name in BANDS] + [LONGER]
