"""Results: the versioned results-file schema, atomic writers, compare and report."""
