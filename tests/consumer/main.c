/*
 * main.c - the smallest program built against an installed ringfeed: it checks
 * that the header it compiled with and the library it loaded agree.
 */
#include <ringfeed.h>
#include <stdio.h>

int main(void)
{
    int v = rf_version();
    printf("ringfeed %d.%d.%d (header %d)\n", v / 10000, v / 100 % 100, v % 100, RF_VERSION_NUMBER);
    if (v != RF_VERSION_NUMBER) {
        fprintf(stderr, "consumer: library version %d != header version %d\n", v,
                RF_VERSION_NUMBER);
        return 1;
    }
    printf("rf_strerror(RF_E_IO) = %s\n", rf_strerror(RF_E_IO));
    return 0;
}
