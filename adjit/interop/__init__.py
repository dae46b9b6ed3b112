"""adjit inside other frameworks' programs: `adjit.torch` (torch.py) and `adjit.jax` (jax.py),
imported on first use, never by `import adjit`. What both share, an adjit function or kernel
launch seen as a pure function of arrays with its derivatives, is operation.py."""
