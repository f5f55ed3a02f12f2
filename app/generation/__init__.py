"""The generation path: store the turn, build the prompt through the sources, stream the reply."""
