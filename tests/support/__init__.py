"""Helpers more than one test folder uses: written once here, imported where needed."""
