"""The IPython/Jupyter integration: the extension, the magics, the in-kernel runner and the
tools that act on the kernel's namespace, the notebook and the workspace's files.

Imported only when IPython loads the extension (``%load_ext ipyagent``); ``import ipyagent``
never imports this package.
"""
