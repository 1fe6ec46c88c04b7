import asyncio
import hashlib
import os
import sys

from django import forms
from django.http import JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse


def item(request, pk):
    """The path converter's value, and what Django made of the ASGI scope."""
    return JsonResponse(
        {
            "pk": pk,
            "path": request.path,
            "path_info": request.path_info,
            "script_name": request.META.get("SCRIPT_NAME", ""),
            "next": reverse("item", args=[pk + 1]),
            "host": request.get_host(),
            "remote_addr": request.META.get("REMOTE_ADDR"),
            "query": request.GET.get("q"),
        }
    )


async def hello(request, name):
    """An async view: Django calls it on the worker's event loop."""
    return JsonResponse({"hello": name})


class NoteForm(forms.Form):
    title = forms.CharField(max_length=50)
    count = forms.IntegerField(min_value=1)


def form(request):
    """GET: the form with its CSRF token. POST: the cleaned data, or 400 and the errors."""
    if request.method == "POST":
        note = NoteForm(request.POST)
        if not note.is_valid():
            return JsonResponse({"errors": note.errors}, status=400)
        return JsonResponse({"saved": note.cleaned_data})
    return render(request, "form.html", {"form": NoteForm()})


def upload(request):
    """A multipart upload (CSRF-protected too): the file's name, size and sha256."""
    if request.method != "POST" or "file" not in request.FILES:
        return JsonResponse({"error": "POST a file"}, status=400)
    upload = request.FILES["file"]
    digest = hashlib.sha256()
    for chunk in upload.chunks():
        digest.update(chunk)
    return JsonResponse(
        {
            "name": upload.name,
            "size": upload.size,
            "sha256": digest.hexdigest(),
            "on_disk": hasattr(upload, "temporary_file_path"),
            "note": request.POST.get("note"),
        }
    )


async def stream(request):
    """A streamed response: "first", then "last" once the test has created the marker."""
    marker = request.GET["marker"]

    async def chunks():
        yield "first\n"
        while not os.path.exists(marker):
            await asyncio.sleep(0.01)
        yield "last\n"

    response = StreamingHttpResponse(chunks(), content_type="text/plain")
    # nginx buffers a FastCGI response unless told not to.
    response["X-Accel-Buffering"] = "no"
    return response


async def wait(request):
    """Waits for good; Django cancels it when the client goes away (http.disconnect)."""
    tag = request.GET["id"]
    print(f"django view started {tag}", file=sys.stderr, flush=True)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        print(f"django view cancelled {tag}", file=sys.stderr, flush=True)
        raise
    return JsonResponse({"waited": tag})
