"""Wire dialects: pure renderings of a scripted reply."""
