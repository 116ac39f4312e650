"""Stub of myst_nb for the GPU timing harness: glue() records str(value)."""

GLUED = {}


def glue(name, value, display=True):
    try:
        import matplotlib.figure

        if isinstance(value, matplotlib.figure.Figure):
            import matplotlib.pyplot as plt

            GLUED[name] = "<Figure>"
            plt.close(value)
            return
    except ImportError:
        pass
    text = str(value)
    GLUED[name] = text if len(text) <= 300 else text[:297] + "..."
