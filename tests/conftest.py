"""Puts this folder on sys.path (pytest's rootdir conftest), so tests can `import helpers`."""
