"""Console entry point (placeholder until the CLI lands)."""


def main() -> None:
    import ltm

    print(ltm.__version__)
