"""The domain of the Abstention Workbench, in plain Python (no Streamlit below this package)."""
