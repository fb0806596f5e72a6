"""What a run leaves: run folders, records, signatures, reports, the summary, migration tables, comparisons."""
