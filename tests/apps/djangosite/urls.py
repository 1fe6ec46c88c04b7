from django.urls import path

from . import views

urlpatterns = [
    path("items/<int:pk>/", views.item, name="item"),
    path("hello/<slug:name>/", views.hello, name="hello"),
    path("form/", views.form, name="form"),
    path("upload/", views.upload, name="upload"),
    path("stream/", views.stream, name="stream"),
    path("wait/", views.wait, name="wait"),
]
