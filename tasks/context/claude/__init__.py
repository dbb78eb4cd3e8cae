"""Claude as contextualizer and summarizer, through the official ``anthropic`` SDK."""
