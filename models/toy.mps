NAME toy
OBJSENSE
    MAX
ROWS
 N obj
 E r0
 L r1
 L r2
 L r3
 L r4
 L r5
 L r6
 L r7
 L r8
 L r9
 L r10
 L r11
 L r12
 L r13
 L r14
 L r15
 L r16
 L r17
 L r18
 L r19
 L r20
 L r21
 L r22
 L r23
 L r24
 L r25
 L r26
 L r27
 L r28
 L r29
 L r30
 L r31
 L r32
 L r33
 L r34
 L r35
 L r36
 L r37
 L r38
 L r39
 L r40
 L r41
 L r42
 L r43
 L r44
 L r45
 L r46
 L r47
 L r48
 L r49
 L r50
 L r51
 L r52
 L r53
 L r54
 L r55
 L r56
 L r57
 L r58
COLUMNS
    MARKER 'MARKER' 'INTORG'
    x0 obj 7.291666666666668
    x0 r0 -1.0
    x0 r11 -5.0
    x0 r15 -1.0
    x1 obj 7.267361111111112
    x1 r0 -1.0
    x1 r11 -5.0
    x1 r15 1.0
    x1 r16 -1.0
    x2 obj 7.243055555555556
    x2 r0 -1.0
    x2 r11 -5.0
    x2 r16 1.0
    x2 r17 -1.0
    x3 obj 7.21875
    x3 r0 -1.0
    x3 r11 -5.0
    x3 r17 1.0
    x3 r18 -1.0
    x4 obj 7.1944444444444455
    x4 r0 -1.0
    x4 r11 -5.0
    x4 r18 1.0
    x4 r19 -1.0
    x5 obj 7.170138888888888
    x5 r0 -1.0
    x5 r11 -5.0
    x5 r19 1.0
    x5 r20 -1.0
    x6 obj 7.145833333333334
    x6 r0 -1.0
    x6 r11 -5.0
    x6 r20 1.0
    x6 r21 -1.0
    x7 obj 7.121527777777778
    x7 r0 -1.0
    x7 r11 -5.0
    x7 r21 1.0
    x7 r22 -1.0
    x8 obj 7.097222222222222
    x8 r0 -1.0
    x8 r11 -5.0
    x8 r22 1.0
    x8 r23 -1.0
    x9 obj 7.072916666666666
    x9 r0 -1.0
    x9 r11 -5.0
    x9 r23 1.0
    x9 r24 -1.0
    x10 obj 7.048611111111112
    x10 r0 -1.0
    x10 r11 -5.0
    x10 r24 1.0
    x10 r25 -1.0
    x11 obj 7.024305555555555
    x11 r0 -1.0
    x11 r11 -5.0
    x11 r25 1.0
    x12 obj 6.25
    x12 r0 -1.0
    x12 r12 -5.0
    x12 r26 -1.0
    x13 obj 6.229166666666667
    x13 r0 -1.0
    x13 r12 -5.0
    x13 r26 1.0
    x13 r27 -1.0
    x14 obj 6.208333333333334
    x14 r0 -1.0
    x14 r12 -5.0
    x14 r27 1.0
    x14 r28 -1.0
    x15 obj 6.1875
    x15 r0 -1.0
    x15 r12 -5.0
    x15 r28 1.0
    x15 r29 -1.0
    x16 obj 6.166666666666667
    x16 r0 -1.0
    x16 r12 -5.0
    x16 r29 1.0
    x16 r30 -1.0
    x17 obj 6.145833333333332
    x17 r0 -1.0
    x17 r12 -5.0
    x17 r30 1.0
    x17 r31 -1.0
    x18 obj 6.124999999999999
    x18 r0 -1.0
    x18 r12 -5.0
    x18 r31 1.0
    x18 r32 -1.0
    x19 obj 6.104166666666666
    x19 r0 -1.0
    x19 r12 -5.0
    x19 r32 1.0
    x19 r33 -1.0
    x20 obj 6.083333333333333
    x20 r0 -1.0
    x20 r12 -5.0
    x20 r33 1.0
    x20 r34 -1.0
    x21 obj 6.0625
    x21 r0 -1.0
    x21 r12 -5.0
    x21 r34 1.0
    x21 r35 -1.0
    x22 obj 6.041666666666666
    x22 r0 -1.0
    x22 r12 -5.0
    x22 r35 1.0
    x22 r36 -1.0
    x23 obj 6.020833333333333
    x23 r0 -1.0
    x23 r12 -5.0
    x23 r36 1.0
    x24 obj 8.333333333333336
    x24 r0 -1.0
    x24 r13 -5.0
    x24 r37 -1.0
    x25 obj 8.305555555555555
    x25 r0 -1.0
    x25 r13 -5.0
    x25 r37 1.0
    x25 r38 -1.0
    x26 obj 8.277777777777779
    x26 r0 -1.0
    x26 r13 -5.0
    x26 r38 1.0
    x26 r39 -1.0
    x27 obj 8.25
    x27 r0 -1.0
    x27 r13 -5.0
    x27 r39 1.0
    x27 r40 -1.0
    x28 obj 8.222222222222223
    x28 r0 -1.0
    x28 r13 -5.0
    x28 r40 1.0
    x28 r41 -1.0
    x29 obj 8.194444444444445
    x29 r0 -1.0
    x29 r13 -5.0
    x29 r41 1.0
    x29 r42 -1.0
    x30 obj 8.166666666666666
    x30 r0 -1.0
    x30 r13 -5.0
    x30 r42 1.0
    x30 r43 -1.0
    x31 obj 8.13888888888889
    x31 r0 -1.0
    x31 r13 -5.0
    x31 r43 1.0
    x31 r44 -1.0
    x32 obj 8.11111111111111
    x32 r0 -1.0
    x32 r13 -5.0
    x32 r44 1.0
    x32 r45 -1.0
    x33 obj 8.083333333333334
    x33 r0 -1.0
    x33 r13 -5.0
    x33 r45 1.0
    x33 r46 -1.0
    x34 obj 8.055555555555555
    x34 r0 -1.0
    x34 r13 -5.0
    x34 r46 1.0
    x34 r47 -1.0
    x35 obj 8.027777777777779
    x35 r0 -1.0
    x35 r13 -5.0
    x35 r47 1.0
    x36 obj 9.375
    x36 r0 -1.0
    x36 r14 -5.0
    x36 r48 -1.0
    x37 obj 9.34375
    x37 r0 -1.0
    x37 r14 -5.0
    x37 r48 1.0
    x37 r49 -1.0
    x38 obj 9.3125
    x38 r0 -1.0
    x38 r14 -5.0
    x38 r49 1.0
    x38 r50 -1.0
    x39 obj 9.28125
    x39 r0 -1.0
    x39 r14 -5.0
    x39 r50 1.0
    x39 r51 -1.0
    x40 obj 9.25
    x40 r0 -1.0
    x40 r14 -5.0
    x40 r51 1.0
    x40 r52 -1.0
    x41 obj 9.218749999999998
    x41 r0 -1.0
    x41 r14 -5.0
    x41 r52 1.0
    x41 r53 -1.0
    x42 obj 9.1875
    x42 r0 -1.0
    x42 r14 -5.0
    x42 r53 1.0
    x42 r54 -1.0
    x43 obj 9.15625
    x43 r0 -1.0
    x43 r14 -5.0
    x43 r54 1.0
    x43 r55 -1.0
    x44 obj 9.124999999999998
    x44 r0 -1.0
    x44 r14 -5.0
    x44 r55 1.0
    x44 r56 -1.0
    x45 obj 9.09375
    x45 r0 -1.0
    x45 r14 -5.0
    x45 r56 1.0
    x45 r57 -1.0
    x46 obj 9.0625
    x46 r0 -1.0
    x46 r14 -5.0
    x46 r57 1.0
    x46 r58 -1.0
    x47 obj 9.03125
    x47 r0 -1.0
    x47 r14 -5.0
    x47 r58 1.0
    x48 r0 1.0
    x48 r1 5.0
    x49 r0 1.0
    x49 r2 5.0
    x50 r0 1.0
    x50 r3 5.0
    x51 r0 1.0
    x51 r4 5.0
    x52 r0 1.0
    x52 r5 5.0
    x53 r0 1.0
    x53 r6 5.0
    x54 r0 1.0
    x54 r7 5.0
    x55 r0 1.0
    x55 r8 5.0
    x56 r0 1.0
    x56 r9 5.0
    x57 r0 1.0
    x57 r10 5.0
    x58 obj 250.81699346405233
    x58 r11 1.0
    x59 obj 187.95955882352942
    x59 r12 1.0
    x60 obj 313.7765522875817
    x60 r13 1.0
    x61 obj 376.8382352941176
    x61 r14 1.0
    MARKER 'MARKER' 'INTEND'
RHS
    rhs r1 10.0
    rhs r2 10.0
    rhs r3 10.0
    rhs r4 10.0
    rhs r5 10.0
    rhs r6 10.0
    rhs r7 10.0
    rhs r8 10.0
    rhs r9 10.0
    rhs r10 10.0
BOUNDS
 UP bnd x0 1.0
 UP bnd x1 1.0
 UP bnd x2 1.0
 UP bnd x3 1.0
 UP bnd x4 1.0
 UP bnd x5 1.0
 UP bnd x6 1.0
 UP bnd x7 1.0
 UP bnd x8 1.0
 UP bnd x9 1.0
 UP bnd x10 1.0
 UP bnd x11 1.0
 UP bnd x12 1.0
 UP bnd x13 1.0
 UP bnd x14 1.0
 UP bnd x15 1.0
 UP bnd x16 1.0
 UP bnd x17 1.0
 UP bnd x18 1.0
 UP bnd x19 1.0
 UP bnd x20 1.0
 UP bnd x21 1.0
 UP bnd x22 1.0
 UP bnd x23 1.0
 UP bnd x24 1.0
 UP bnd x25 1.0
 UP bnd x26 1.0
 UP bnd x27 1.0
 UP bnd x28 1.0
 UP bnd x29 1.0
 UP bnd x30 1.0
 UP bnd x31 1.0
 UP bnd x32 1.0
 UP bnd x33 1.0
 UP bnd x34 1.0
 UP bnd x35 1.0
 UP bnd x36 1.0
 UP bnd x37 1.0
 UP bnd x38 1.0
 UP bnd x39 1.0
 UP bnd x40 1.0
 UP bnd x41 1.0
 UP bnd x42 1.0
 UP bnd x43 1.0
 UP bnd x44 1.0
 UP bnd x45 1.0
 UP bnd x46 1.0
 UP bnd x47 1.0
 UP bnd x48 2.0
 UP bnd x49 2.0
 UP bnd x50 2.0
 UP bnd x51 2.0
 UP bnd x52 2.0
 UP bnd x53 2.0
 UP bnd x54 2.0
 UP bnd x55 2.0
 UP bnd x56 2.0
 UP bnd x57 2.0
 UP bnd x58 40.0
 UP bnd x59 30.0
 UP bnd x60 20.0
 UP bnd x61 10.0
ENDATA
