from django.db import models


class Counter(models.Model):
    """A named counter, standing in for a sequence on databases without them (SQLite)."""

    name = models.CharField(max_length=60, unique=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"
