"""Admin pieces shared by the apps."""


class ReadOnlyAdminMixin:
    """Rows only the product writes (history, audit, records of what was done): the admin looks, it does not edit."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
