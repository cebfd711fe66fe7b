"""pytest plugin entry point of the conformance runner (inert unless --conformance is given)."""
