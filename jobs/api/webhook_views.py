"""The calls on the organization's webhook endpoints and what was sent to them
(jobs/services/webhook_endpoints.py)."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.api.paging import page_of
from jobs.api.queries import DeliveryQuery
from jobs.api.serializers import (
    WebhookDeliverySerializer,
    WebhookEndpointSerializer,
)
from jobs.models import WebhookEndpoint
from jobs.services.webhook_endpoints import (
    deliveries_of,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_ping,
    webhook_redeliver,
    webhook_secret_rotate,
)


class WebhookListCreate(APIView):
    """An organization's webhook endpoints; the secret that signs deliveries is given once,
    in the answer that creates the endpoint."""

    def get(self, request):
        hooks = WebhookEndpoint.objects.filter(organization=request.user.organization)
        return Response({"results": WebhookEndpointSerializer(hooks, many=True).data})

    def post(self, request):
        body = WebhookEndpointSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        hook = webhook_endpoint_create(organization=request.user.organization,
                                       url=body.validated_data["url"],
                                       events=body.validated_data.get("events"),
                                       api_key=request.auth)
        return Response({**WebhookEndpointSerializer(hook).data, "secret": hook.secret},
                        status=status.HTTP_201_CREATED)


class WebhookDetail(APIView):
    def delete(self, request, hook_id: int):
        webhook_endpoint_delete(organization=request.user.organization, hook_id=hook_id,
                                api_key=request.auth)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateSecret(APIView):
    """POST: a new secret for the endpoint, shown this once; the one before signs too until
    `previous_secret_until` (a day), while the receiver moves to the new one."""

    def post(self, request, hook_id: int):
        hook = webhook_secret_rotate(organization=request.user.organization, hook_id=hook_id,
                                     api_key=request.auth)
        return Response({**WebhookEndpointSerializer(hook).data, "secret": hook.secret,
                         "previous_secret_until": hook.previous_secret_until})


class WebhookDeliveries(APIView):
    """GET: what was sent to the endpoint, newest first, a page at a time (`?status=`,
    `?limit=`, `?before=`): each delivery's event, job, status, attempts and last error."""

    def get(self, request, hook_id: int):
        query = DeliveryQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        deliveries = deliveries_of(organization=request.user.organization, hook_id=hook_id)
        if "status" in query.validated_data:
            deliveries = deliveries.filter(status=query.validated_data["status"])
        page, following = page_of(deliveries, query.validated_data, request,
                                  f"/api/v1/webhooks/{hook_id}/deliveries")
        return Response({"results": WebhookDeliverySerializer(page, many=True).data,
                         "next": following})


class WebhookPing(APIView):
    """POST: send the endpoint a signed test notice now; 202 with its delivery."""

    def post(self, request, hook_id: int):
        delivery = webhook_ping(organization=request.user.organization, hook_id=hook_id,
                                api_key=request.auth)
        return Response(WebhookDeliverySerializer(delivery).data,
                        status=status.HTTP_202_ACCEPTED)


class WebhookRedeliver(APIView):
    """POST: send a delivery that failed (or arrived) again, now; 202 with it."""

    def post(self, request, hook_id: int, delivery_id: int):
        delivery = webhook_redeliver(organization=request.user.organization, hook_id=hook_id,
                                     delivery_id=delivery_id, api_key=request.auth)
        return Response(WebhookDeliverySerializer(delivery).data,
                        status=status.HTTP_202_ACCEPTED)
