"""Operators' acts from admin's lists: an organization's suspension and resumption
(jobs/services/suspension.py), and a job's cancel (jobs/services/cancellation.py), hold and
release (jobs/services/job_hold.py), requeue (jobs/services/requeue.py), run again
(jobs/services/redrive.py), time limit (jobs/services/time_limits.py), refund
(credits/services/refunds.py) and erasure (jobs/services/erasure.py)."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.template.response import TemplateResponse

from credits.services.refunds import job_refund
from gpusched.admin_base import action_form, operator_action
from jobs.services.cancellation import job_cancel
from jobs.services.erasure import job_erase
from jobs.services.errors import ServiceError
from jobs.services.job_hold import OPERATOR, job_hold, job_release
from jobs.services.redrive import job_redrive
from jobs.services.requeue import job_requeue
from jobs.services.suspension import organization_resume, organization_suspend
from jobs.services.time_limits import job_set_time_limit


class SuspendForm(forms.Form):
    reason = forms.CharField(max_length=200, help_text="Shown to the organization's clients "
                                                       "in each refusal, and kept in its audit "
                                                       "trail.")


@operator_action("Suspend: accept and start no new jobs")
def suspend(modeladmin, request, queryset):
    form = action_form(modeladmin, request, queryset, SuspendForm, action="suspend",
                       intro="Suspend", button="Suspend",
                       explained="No new job is accepted or started until it is resumed; "
                                 "running jobs finish; jobs, outputs, logs and credits stay "
                                 "readable.")
    if isinstance(form, TemplateResponse):
        return form
    for org in queryset:
        try:
            done = organization_suspend(organization=org, reason=form.cleaned_data["reason"],
                                        by=request.user)
        except ServiceError as exc:
            messages.error(request, f"{org.slug}: {exc.message}")
            continue
        messages.info(request, f"{org.slug} is suspended." if done
                      else f"{org.slug} was suspended already.")
    return None


@operator_action("Resume suspended organizations")
def resume(modeladmin, request, queryset):
    for org in queryset:
        done = organization_resume(organization=org, by=request.user)
        messages.info(request, f"{org.slug} is resumed." if done
                      else f"{org.slug} was not suspended.")


def _each_job(request, jobs, act: Callable, done: str) -> None:
    """`act` on each job; one message naming the ids done (what `act` returns) and one with
    each refusal (a job service's refusal names its job)."""
    made, refused = [], []
    for job in jobs:
        try:
            made.append(act(job).pk)
        except ServiceError as exc:
            refused.append(exc.message)
    if made:
        messages.info(request, f"{done}: {', '.join(map(str, made))}.")
    if refused:
        messages.warning(request, "; ".join(refused))


@operator_action("Stop and requeue (running jobs checkpoint and resume later)")
def requeue(modeladmin, request, queryset):
    by = request.user.get_username()
    _each_job(request, queryset, lambda job: job_requeue(job=job, by=by),
              "Asked to stop and requeue")


@operator_action("Run again as new jobs (dead, failed or timed out)")
def run_again(modeladmin, request, queryset):
    by = request.user.get_username()
    _each_job(request, queryset.select_related("organization__tier", "project",
                                               "submitted_by"),
              lambda job: job_redrive(job=job, by=by), "New jobs queued")


class NoteForm(forms.Form):
    note = forms.CharField(max_length=150, required=False,
                           help_text="Why: the organization reads it where the text above "
                                     "says.")


class RefundForm(NoteForm):
    credits = forms.IntegerField(min_value=1, required=False,
                                 help_text="At most this many for each job; empty: all it "
                                           "spent.")


class TimeLimitForm(forms.Form):
    # bounded so that the seconds stay a number (1e306 hours would not); the service
    # refuses what is past the service's longest limit, naming it
    hours = forms.FloatField(min_value=0.001, max_value=10**6, help_text=(
        "The new time limit of each try, from its start, in hours."))


def _asking(name: str, description: str, form_class: type[forms.Form], *, verb: str,
            done: str, explained: str, act: Callable, button: str = "") -> Callable:
    """A job list's action `name` that asks first (action_form), then does
    `act(request, job, the form's data)` to each job selected (`_each_job`)."""
    @operator_action(description)
    def action(modeladmin, request, queryset):
        form = action_form(modeladmin, request, queryset, form_class, action=name,
                           noun="job", intro=verb, button=button or verb, explained=explained)
        if isinstance(form, TemplateResponse):
            return form
        _each_job(request, queryset, lambda job: act(request, job, form.cleaned_data), done)
        return None
    action.__name__ = name  # admin posts and finds an action by its function's name
    return action


def _cancel(request, job, asked: dict):
    note = asked["note"]
    return job_cancel(job=job, reason=f"cancelled by an operator{': ' + note if note else ''}")


def _refund(request, job, asked: dict):
    job_refund(job=job, by=request.user, note=asked["note"], amount=asked["credits"])
    return job


cancel = _asking(
    "cancel", "Cancel (running jobs stop on their nodes)", NoteForm, verb="Cancel",
    done="Cancelled", act=_cancel,
    explained="A waiting job ends CANCELLED now and its credits held go back; a running one is "
              "stopped by its node (SIGTERM, then SIGKILL after the kill grace) and ends "
              "CANCELLED when it reports, paying for the GPU time it ran. Jobs that ended are "
              "left as they are. The note is in each job's history and its error.")
refund = _asking(
    "refund", "Refund what they spent (ended jobs)", RefundForm, verb="Refund",
    done="Refunded", act=_refund,
    explained="What each ended job spent and was not refunded yet (or the credits given, at "
              "most) goes back to the wallets it came from; a refund never passes what the "
              "job spent. Jobs still waiting or running are refused: cancel them first. The "
              "note is in each transfer's memo and the organization's audit trail.")
erase = _asking(
    "erase", "Erase their prompts, outputs and logs (ended jobs)", NoteForm, verb="Erase",
    done="Erased", act=lambda request, job, asked: job_erase(job=job, user=request.user,
                                                             note=asked["note"]),
    explained="Each ended job's prompt, params, output, logs, stderr, error text and stored "
              "checkpoints are deleted for good, as a person whose data they are may ask; "
              "its state, labels, history and credits stay. Jobs still waiting or running "
              "are refused: cancel them first. The note is in the organization's audit "
              "trail.")
hold = _asking(
    "hold", "Hold out of the queue (the client cannot release it)", NoteForm, verb="Hold",
    done="Held", act=lambda request, job, asked: job_hold(job=job, by=OPERATOR,
                                                          note=asked["note"]),
    explained="Each waiting job stays HELD, out of the queue, reserving no credits, until an "
              "operator releases it; a running job that checkpoints is stopped at a "
              "checkpoint first and resumes from it once released; one that would start over "
              "is not held. The note is in each job's pending reason.")
change_time_limit = _asking(
    "change_time_limit", "Change the time limit (running jobs too: longer or shorter)",
    TimeLimitForm, verb="Change the time limit of", button="Change", done="Time limit changed",
    act=lambda request, job, asked: job_set_time_limit(
        job=job, time_limit_s=round(asked["hours"] * 3600), by=request.user.get_username(),
        operator=True),
    explained="A running job's node learns its new limit at its next heartbeat; a longer "
              "limit holds what it may cost more of the organization's credits, or is "
              "refused, and a shorter one gives back what it can no longer cost. A limit a "
              "running try has reached already is refused: cancel it instead.")


@operator_action("Release holds (the client's or an operator's)")
def release(modeladmin, request, queryset):
    _each_job(request, queryset, lambda job: job_release(job=job, by=OPERATOR), "Released")
