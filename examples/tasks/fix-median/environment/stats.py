def median(values):
    """Median of a non-empty list of numbers."""
    values.sort()
    return values[len(values) // 2]
