"""The Whoosh engine behind the index: schema, documents, one partition, its writer and its postings."""
