"""`watchrun top`: the live screen (Textual), imported only when that command runs."""
