from django.urls import path

from credits.api.views import CreditBalance

urlpatterns = [path("credits", CreditBalance.as_view(), name="credit-balance")]
