"""A programmable fake OpenAI-compatible gateway that replays fault scenarios."""
