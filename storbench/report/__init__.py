"""Reports: a small toolkit (figures, tables, HTML, PDF) and one module per page."""
