from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from . import selectors


@login_required
def home(request):
    conversations = selectors.conversations_for(request.user)[:50]
    return render(request, "conversations/home.html", {"conversations": conversations})
