"""The notebook: the chat widget (anywidget), its static transcript, the IPython magics."""
