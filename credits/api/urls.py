from django.urls import path

from credits.api.views import CreditBalance, TransferList, Usage

urlpatterns = [
    path("credits", CreditBalance.as_view(), name="credit-balance"),
    path("credits/transfers", TransferList.as_view(), name="credit-transfers"),
    path("credits/usage", Usage.as_view(), name="credit-usage"),
]
