"""What clients ask the API with: the query strings of its listings and reads, and the label
filter of bulk acts, validated as the answers' serializers are (jobs/api/serializers.py)."""

from __future__ import annotations

from rest_framework import serializers

from jobs.api.paging import PageQuery
from jobs.models import WebhookDelivery
from jobs.services.labels import MAX_LABELS, MAX_VALUE
from jobs.states import JobState
from workers.services.logs import STREAMS


class LineQuery(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)


class LogQuery(serializers.Serializer):
    stream = serializers.ChoiceField(choices=STREAMS, default="stdout")
    rank = serializers.IntegerField(min_value=0, default=0,
                                    help_text="The node of a gang spanning nodes (0: its first).")
    tail = serializers.IntegerField(min_value=1, required=False,
                                    help_text="Only the last this many bytes.")


def label_filter(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=64 + MAX_VALUE), max_length=MAX_LABELS,
        help_text="key:value, or key for any value; repeat for all of several.", **kwargs)


MAX_LISTED_IDS = 100  # ids a listing names: a client waiting on a batch asks once for all


class JobListQuery(PageQuery):
    id = serializers.ListField(
        child=serializers.IntegerField(min_value=1), max_length=MAX_LISTED_IDS, required=False,
        help_text="Only these jobs (repeat: id=1&id=2); another organization's are absent.")
    state = serializers.ChoiceField(choices=JobState.values, required=False)
    project = serializers.SlugField(max_length=60, required=False)
    label = label_filter(required=False)


class LabelledQuery(serializers.Serializer):
    label = label_filter(min_length=1)


class SummaryQuery(serializers.Serializer):
    project = serializers.SlugField(max_length=60, required=False)
    label = label_filter(required=False)


class DeliveryQuery(PageQuery):
    status = serializers.ChoiceField(choices=WebhookDelivery.Status.values, required=False)
