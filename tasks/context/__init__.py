"""Context for each chunk before it is indexed: structural (no LLM) and Claude's, and the spec choosing them."""
