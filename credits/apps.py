from django.apps import AppConfig


class CreditsConfig(AppConfig):
    """The credit ledger (accounts, holds, transfers); its models arrive with the ledger."""

    name = "credits"
    verbose_name = "Credits"
